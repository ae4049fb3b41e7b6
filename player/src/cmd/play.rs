//! `braid play ADDR (--server-cert-sha256 HEX | --ca FILE) [--path LOCAL[@IFACE][/ROLE][=REMOTE] …]
//! [--profile P] [--playout POLICY] [--reference FILE] [--headless] [--report FILE]
//! [--battery J] [--power ROLE=FILE …]`: plays a stream from `braid serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use braid_media::playout::PlayoutPolicy;
use braid_transport::profile;

use crate::choice::{TransportChoice, TransportSpec};
use crate::gui::host::{self, OneSession};
use crate::session::open::{PaneSession, one_session_window};
use crate::session::remote::RemotePlay;
use crate::session::report::ReportLabel;
use crate::session::terminal::{self, Results};

/// Playout policies by name.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Policy {
    /// Start at 2.5 s of media, resume at 5 s.
    Fixed,
    /// Start at 1 s of media, resume at 2 s.
    Media3,
    /// Start threshold from the forecast arrival rate and w*.
    Adaptive,
}

/// Arguments of `braid play`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server (`braid serve`).
    addr: SocketAddr,
    /// A local address, optionally @INTERFACE and /ROLE (wifi, lte, 3g or wired: the radio,
    /// for the energy model and the profile's mode switch; default wired, no radio) and
    /// =REMOTE (the address this path sends to instead of ADDR, e.g. a `braid netem` relay)
    /// for one path; repeat for several paths.
    #[arg(long = "path", value_name = "LOCAL[@IFACE][/ROLE][=REMOTE]")]
    paths: Vec<String>,
    /// Transport profile of this end, `PROFILE` or `PROFILE+CC` (`braid profiles`).
    #[arg(long, default_value = "mptcp")]
    profile: TransportSpec,
    /// Congestion controller of this end on every path, replacing the profile's (reno,
    /// lia, olia, cubic, bbr, tfrc, marc or fixed-bdp): it paces what this end sends and
    /// decides whether it asks the server for TFRC feedback; the stream's own controller
    /// is the server's (`braid serve --cc`). The report names the pair `PROFILE+CC`.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Playout policy.
    #[arg(long, value_enum, default_value = "adaptive")]
    playout: Policy,
    /// The original clip: live and final PSNR are measured against it.
    #[arg(long, value_name = "FILE")]
    reference: Option<PathBuf>,
    /// No window even when a display is available.
    #[arg(long)]
    headless: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Write the session report (JSON) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// The viewer's battery capacity, J: the report's `energy.battery_residual_j` is what
    /// the session's radio energy leaves of it (without it the report has no residual
    /// battery).
    #[arg(long = "battery", value_name = "J", value_parser = crate::session::config::battery_j)]
    battery: Option<f64>,
    /// The download-ahead: the transport's receive window holds this many seconds of the
    /// stream's media (its bit rate from `--reference` when given, else taken as
    /// 2 Mbit/s), so the server may send that far ahead of what the player reads (without
    /// it, one second). Braid's transport and noq-multipath (its stream and connection
    /// windows).
    #[arg(long = "max-buffer", value_name = "S", value_parser = crate::session::config::max_buffer_s)]
    max_buffer: Option<f64>,
    /// End the session when nothing arrives on any path for S seconds (RFC 9000's
    /// max_idle_timeout, announced to the server; the smaller of both sides' counts; 0: none
    /// from this side). Default 30. Braid's transport only.
    #[arg(long = "idle-timeout", value_name = "S", value_parser = crate::session::config::idle_timeout_s)]
    idle_timeout: Option<std::time::Duration>,
    /// Write the pictures the viewer saw, one per frame slot (a lost frame repeats the
    /// picture left on screen), as YUV4MPEG2 (`.y4m`); `braid psnr` judges it.
    #[arg(long, value_name = "FILE")]
    save_frames: Option<PathBuf>,
    /// Radio power model for a role, replacing the built-in one: `ROLE=FILE` (ROLE: wifi,
    /// lte or 3g; FILE: TOML as in assets/power); repeat for several roles.
    #[arg(long = "power", value_name = "ROLE=FILE")]
    power: Vec<String>,
    #[command(flatten)]
    tls: crate::cmd::tls::ClientTls,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    // noq-multipath parses its paths as the built-in mptcp does and plays over noq.
    let noq = args.profile.is_noq();
    if noq {
        crate::cmd::kernel::refuse_for_noq(args.cc.as_deref(), &args.traces)?;
        if args.idle_timeout.is_some() {
            anyhow::bail!(
                "--idle-timeout is Braid's transport's; {} keeps noq's idle timeout",
                braid_io::noq_perf::NAME
            );
        }
    }
    let choice = if noq {
        TransportChoice::Braid(profile::lookup("mptcp")?)
    } else {
        args.profile.resolve(args.cc.as_deref())?
    };
    let (kernel, kernel_cc) = match &choice {
        TransportChoice::Kernel { profile, cc } => (Some(*profile), cc.clone()),
        TransportChoice::Braid(_) => (None, None),
    };
    if let Some(k) = kernel {
        crate::cmd::kernel::refuse_traces(k.name(), &args.traces)?;
    }
    if args.traces.pcap.is_some() {
        anyhow::bail!(
            "--pcap captures emulated paths and `braid play` emulates none: give it to netem, demo, compare --realtime or perf --scenario"
        );
    }
    args.traces.prepare(false)?;
    // A kernel profile parses its paths as the built-in mptcp does and plays over a
    // kernel socket.
    let profile = match choice {
        TransportChoice::Kernel { .. } => profile::lookup("mptcp")?,
        TransportChoice::Braid(p) => p,
    };
    let setup = match kernel {
        Some(k) => {
            let cc = crate::cmd::kernel::kernel_cc(kernel_cc.as_deref())?;
            let paths = crate::cmd::kernel::kernel_paths(&args.paths, args.addr, k)?;
            Some(braid_io::kernel::conn::ClientSetup::new(k, &cc, paths))
        }
        None => None,
    };
    let name: String = match kernel {
        Some(k) => match kernel_cc.as_deref() {
            Some(cc) => format!("{}+{cc}", k.name()),
            None => k.name().to_string(),
        },
        None if noq => braid_io::noq_perf::NAME.to_string(),
        None => profile.name.to_string(),
    };
    let limit = match args.duration {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => anyhow::bail!("--duration must be a positive number of seconds, got {s}"),
        None => None,
    };
    let policy = match args.playout {
        Policy::Fixed => PlayoutPolicy::fixed(),
        Policy::Media3 => PlayoutPolicy::media3(),
        Policy::Adaptive => PlayoutPolicy::adaptive(),
    };
    let power = crate::session::config::power_models(&args.power)?;
    if args.idle_timeout.is_some() && setup.is_some() {
        anyhow::bail!(
            "--idle-timeout is Braid's transport's; a kernel profile's connection ends when the kernel's does"
        );
    }
    if args.max_buffer.is_some() && setup.is_some() {
        anyhow::bail!(
            "--max-buffer sizes Braid's receive window; a kernel profile's socket buffers are the kernel's"
        );
    }
    let mut play = RemotePlay {
        power: power.clone(),
        kernel: setup,
        noq,
        max_buffer_s: args.max_buffer,
        idle_timeout: args.idle_timeout,
        ..RemotePlay::new(
            args.addr,
            &args.paths,
            profile.clone(),
            policy,
            args.reference.as_deref(),
            limit,
            args.tls.crypto()?,
        )?
    };
    // Writing what was displayed needs every frame until the end.
    play.keep_history = args.save_frames.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = if !args.headless && crate::gui::display_available() {
        let title = "Braid";
        let (opener, report) = one_session_window(None, &profile, title, &power, args.battery);
        let pane = name.clone();
        let window = OneSession {
            title: title.to_string(),
            paths: Vec::new(),
            commands: None,
            opener,
            report,
        };
        host::run_windowed(
            rt,
            window,
            PaneSession::new(&pane, move |tx, wake| play.run(Some(tx), wake)),
        )?
    } else {
        // The session connects over the transport it names (Braid's, a kernel socket or
        // noq) and plays, with progress on the terminal.
        rt.block_on(terminal::with_progress(limit, |tx| play.run(Some(tx), Arc::new(|| {}))))
            .map(Some)?
    };
    let results = Results {
        save_frames: args.save_frames.as_deref(),
        report: args.report.as_deref(),
        label: ReportLabel { battery_j: args.battery, ..ReportLabel::named("play") },
        profile: &name,
    };
    terminal::finish(outcome.as_ref(), &results)
}
