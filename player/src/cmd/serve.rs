//! `braid serve FILE --listen ADDR [--profile P] [--loop S] [--cert FILE --key FILE]`: streams a clip to every
//! client that connects, until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::RetryPolicy;
use braid_transport::profile;

use crate::choice::{TransportChoice, TransportSpec};
use crate::session::realtime;

/// Arguments of `braid serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The clip to stream (.mp4, .3gp, .mov, raw .h264/.h263).
    file: PathBuf,
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Transport profile (decides congestion control, scheduling and delivery), `PROFILE`
    /// or `PROFILE+CC` (`braid profiles`).
    #[arg(long, default_value = "mptcp")]
    profile: TransportSpec,
    /// Congestion controller of the stream's sender on every path, replacing the
    /// profile's: reno, lia, olia, cubic, bbr, tfrc, marc or fixed-bdp. With a kernel
    /// profile: the socket's controller (`TCP_CONGESTION`: cubic, reno, bbr, …; default
    /// cubic).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Repeat the clip for this many seconds (default: play it once).
    #[arg(long = "loop", value_name = "S")]
    loop_s: Option<f64>,
    /// Answer every ClientHello without a token with a Retry (RFC 9000 §8.1.2 address
    /// validation); without it, only once 16 handshakes are half-open. Braid's transport
    /// only.
    #[arg(long)]
    retry: bool,
    #[command(flatten)]
    tls: crate::cmd::tls::ServerTls,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
}

/// What serves the clips: a kernel socket with its controller, n0's noq, or Braid's
/// transport.
enum Served {
    Kernel(braid_io::kernel::KernelProfile, String),
    Noq,
    BuiltIn(profile::Profile),
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let noq = args.profile.is_noq();
    if noq {
        crate::cmd::kernel::refuse_for_noq(args.cc.as_deref(), &args.traces)?;
        if args.retry {
            anyhow::bail!(
                "--retry is Braid's transport's address validation; {} runs noq's",
                braid_io::noq_perf::NAME
            );
        }
    }
    // `None`: noq-multipath, which names no Braid or kernel profile.
    let choice = if noq { None } else { Some(args.profile.resolve(args.cc.as_deref())?) };
    if let Some(TransportChoice::Kernel { profile: k, .. }) = &choice {
        crate::cmd::kernel::refuse_traces(k.name(), &args.traces)?;
    }
    if args.traces.pcap.is_some() {
        anyhow::bail!(
            "--pcap captures emulated paths and `braid serve` emulates none: give it to netem, demo, compare --realtime or perf --scenario"
        );
    }
    // The profile and controller are checked before any file is opened, so a wrong flag
    // is reported as itself: a kernel profile with the kernel controller it names, or a
    // built-in profile.
    if args.retry && matches!(choice, Some(TransportChoice::Kernel { .. })) {
        anyhow::bail!(
            "--retry is Braid's transport's address validation; a kernel profile's handshake is the kernel's TCP"
        );
    }
    let transport = match choice {
        Some(TransportChoice::Kernel { profile: k, cc }) => {
            Served::Kernel(k, crate::cmd::kernel::kernel_cc(cc.as_deref())?)
        }
        Some(TransportChoice::Braid(p)) => Served::BuiltIn(p),
        None => Served::Noq,
    };
    args.traces.prepare(false)?;
    let clip = realtime::load_clip(&args.file)?;
    let loop_for = match args.loop_s {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => anyhow::bail!("--loop must be a positive number of seconds, got {s}"),
        None => None,
    };
    let identity = args.tls.identity()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let profile = match transport {
        Served::Kernel(k, cc) => {
            return rt.block_on(realtime::serve_kernel_clients(
                args.listen,
                &args.file,
                clip,
                k,
                &cc,
                loop_for,
                identity.crypto,
            ));
        }
        Served::Noq => {
            return rt.block_on(realtime::serve_noq_clients(
                args.listen,
                &args.file,
                clip,
                loop_for,
                identity.crypto,
            ));
        }
        Served::BuiltIn(profile) => profile,
    };
    rt.block_on(realtime::serve_clients(
        args.listen,
        &args.file,
        clip,
        &profile,
        loop_for,
        identity.crypto,
        if args.retry { RetryPolicy::Always } else { RetryPolicy::UnderLoad },
    ))
}
