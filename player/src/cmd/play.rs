//! `braid play ADDR [--path LOCAL[@IFACE] …] [--profile P] [--playout POLICY]
//! [--reference FILE] [--headless] [--report FILE]`: plays a stream from `braid serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::{self, PathSpec};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::playout::PlayoutPolicy;
use braid_transport::path::PathRole;
use braid_transport::profile::{self, PathUse};

use crate::session::realtime::{self, PlayOptions};
use crate::session::stream::ClientConfig;

/// Playout policies by name.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Policy {
    /// Start at 2.5 s of media, resume at 5 s.
    Fixed,
    /// Start threshold from the forecast arrival rate and w*.
    Adaptive,
}

/// Arguments of `braid play`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server (`braid serve`).
    addr: SocketAddr,
    /// A local address (and interface) for one path; repeat for several paths.
    #[arg(long = "path", value_name = "LOCAL[@IFACE]")]
    paths: Vec<String>,
    /// Transport profile of this end.
    #[arg(long, default_value = "mptcp")]
    profile: String,
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
    /// Write the pictures the viewer saw, one per frame slot (a lost frame repeats the
    /// picture left on screen), as YUV4MPEG2 (`.y4m`); `braid psnr` judges it.
    #[arg(long, value_name = "FILE")]
    save_frames: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let profile = profile::lookup(&args.profile)?;
    let limit = match args.duration {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => anyhow::bail!("--duration must be a positive number of seconds, got {s}"),
        None => None,
    };
    let (reference, clip_name) = match &args.reference {
        Some(p) => {
            let clip = realtime::load_clip(p)?;
            let (frames, _) =
                ffmpeg_decode_clip(&clip).with_context(|| format!("decoding {}", p.display()))?;
            (Some(Arc::new(frames)), p.display().to_string())
        }
        None => (None, format!("stream from {}", args.addr)),
    };
    let mut paths = Vec::new();
    if args.paths.is_empty() {
        paths.push(("path0".to_string(), PathSpec::to(args.addr, PathRole::Wired)));
    }
    for (i, p) in args.paths.iter().enumerate() {
        let np = crate::cmd::perf::parse_path(p, args.addr, i)?;
        paths.push((np.name, np.spec));
    }
    if profile.paths == PathUse::Single {
        paths.truncate(1);
    }
    let policy = match args.playout {
        Policy::Fixed => PlayoutPolicy::fixed(),
        Policy::Adaptive => PlayoutPolicy::adaptive(),
    };
    let names: Vec<String> = paths.iter().map(|p| p.0.clone()).collect();
    let specs: Vec<PathSpec> = paths.into_iter().map(|p| p.1).collect();
    // About a second of a few-Mbit/s stream: the player's buffer, not the transport's,
    // decides how far ahead the server gets.
    let config = Arc::new(crate::cmd::perf::config_with(&profile, true, Some(256 * 1024)));
    let opts = move |display, wake| PlayOptions {
        client: ClientConfig { policy: policy.clone(), ..ClientConfig::default() },
        limit,
        reference: reference.clone(),
        clip_name: clip_name.clone(),
        display,
        wake,
        path_names: names.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let options = driver::ConnectOptions::with_path_policy(profile.path_policy);
    let connect = {
        let addr = args.addr;
        move || async move {
            let seed = u64::from(std::process::id()) ^ 0x0b1a_d000;
            driver::connect_with(config, specs, seed, options)
                .await
                .with_context(|| format!("connecting to {addr}"))
        }
    };
    let outcome = if !args.headless && crate::gui::display_available() {
        crate::cmd::demo::run_windowed(
            rt,
            "Braid",
            profile.clone(),
            Vec::new(),
            None,
            None,
            move |tx, wake| {
                let opts = opts(Some(tx), wake);
                async move {
                    let conn = Arc::new(connect().await?);
                    realtime::play(conn, opts).await
                }
            },
        )?
    } else {
        rt.block_on(async move {
            let conn = Arc::new(connect().await?);
            let (tx, rx) = std::sync::mpsc::channel();
            let progress = crate::cmd::demo::terminal_progress(rx, limit);
            let result = realtime::play(conn, opts(Some(tx), Arc::new(|| {}))).await;
            let _ = progress.join();
            result.map(Some)
        })?
    };
    let Some(outcome) = outcome else {
        println!("window closed before the session ended");
        return Ok(());
    };
    crate::cmd::demo::print_summary(&outcome);
    if let Some(path) = &args.save_frames {
        let n = outcome
            .client
            .write_displayed(path)
            .with_context(|| format!("writing the displayed frames to {}", path.display()))?;
        println!("  displayed frames       {n} written to {}", path.display());
    }
    if let Some(path) = &args.report {
        crate::cmd::demo::write_report(path, "play", profile.name, None, &outcome)?;
    }
    Ok(())
}
