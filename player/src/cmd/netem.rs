//! `braid netem --scenario FILE [--server ADDR] [--listen IP] [--base-port PORT]`: runs the
//! scenario's paths as UDP relays until interrupted, printing one line per path:
//! `path NAME listen ADDR -> ADDR`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use braid_io::relay;
use braid_netem::scenario::Scenario;

/// Arguments of `braid netem`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario whose paths to emulate.
    #[arg(long)]
    scenario: PathBuf,
    /// Where the server listens.
    #[arg(long, default_value = "127.0.0.1:4433")]
    server: SocketAddr,
    /// Address the relays listen on.
    #[arg(long, default_value = "127.0.0.1")]
    listen: IpAddr,
    /// First listening port (path i listens on PORT + i); ephemeral ports when absent.
    #[arg(long, value_name = "PORT")]
    base_port: Option<u16>,
    /// Stop after this many seconds (default: the scenario's duration_s; 0 = until interrupted).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.traces.qlog.is_some() || args.traces.keylog.is_some() {
        anyhow::bail!(
            "--qlog and --keylog record connections, and the relay has none of its own: give them to the endpoints (serve, play, perf); the relay writes --pcap"
        );
    }
    args.traces.prepare(false)?;
    let scenario = Scenario::load(&args.scenario)?;
    if !scenario.cross.is_empty() {
        // Said rather than silently dropped: the relay moves the endpoints' datagrams only.
        eprintln!(
            "warning: the relay does not generate the scenario's cross traffic ({} [[cross]] table(s)); `braid sim` and simulated `braid compare` do",
            scenario.cross.len()
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let handle =
            relay::start(&scenario, args.server, args.listen, args.base_port, scenario.seed)
                .await?;
        for p in handle.paths() {
            println!("path {} listen {} -> {}", p.name, p.listen, p.server);
        }
        let limit = match args.duration {
            Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
            Some(_) => None,
            None => Some(scenario.duration),
        };
        match limit {
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        let stats = handle.stats();
        let names: Vec<String> = handle.paths().iter().map(|p| p.name.clone()).collect();
        handle.stop().await;
        for (name, n) in names.iter().zip(&stats.foreign_dropped).filter(|(_, n)| **n > 0) {
            println!("path {name}: {n} datagrams from other addresses than its client dropped");
        }
        for (name, c) in stats.links {
            println!(
                "link {name}: {} datagrams in, {} delivered, dropped {} queue / {} loss / {} down",
                c.enqueued, c.delivered, c.dropped_queue, c.dropped_loss, c.dropped_down
            );
        }
        anyhow::Ok(())
    })
}
