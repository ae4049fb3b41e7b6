//! `braid interop`: the QUIC interop runner's endpoints, speaking `hq-interop` (HTTP/0.9
//! over QUIC: `GET /NAME\r\n` on a client bidirectional stream, the file's bytes back, FIN)
//! over Braid's transport ([`braid_io::hq`]).
//!
//! - `braid interop server --listen ADDR --root DIR [--retry] [--cert FILE --key FILE]`
//!   serves the files under DIR until interrupted.
//! - `braid interop client URL… --output DIR (--server-cert-sha256 HEX | --ca FILE |
//!   --insecure) [--key-update] [--chacha20] [--migrate] [--path LOCAL[/ROLE][=REMOTE] …]`
//!   fetches `https://HOST:PORT/NAME` URLs (one server) into DIR; exit 0 only if every
//!   file arrived.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use braid_io::driver::{self, RetryPolicy};
use braid_io::hq;
use braid_transport::profile::{self, Side};

use crate::session::config::real_time;
use crate::session::paths::client_paths;

/// Arguments of `braid interop`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Serve files with hq-interop until interrupted.
    Server(ServerArgs),
    /// Fetch files with hq-interop.
    Client(ClientArgs),
}

#[derive(Debug, clap::Args)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// The directory whose files are served (`GET /NAME` is DIR/NAME; nothing outside it).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Answer every ClientHello without a token with a Retry (RFC 9000 §8.1.2).
    #[arg(long)]
    retry: bool,
    #[command(flatten)]
    tls: crate::cmd::tls::ServerTls,
}

#[derive(Debug, clap::Args)]
struct ClientArgs {
    /// The files, as https://HOST:PORT/NAME, all on one server.
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
    /// The directory the files are written to (file name = NAME's last component).
    #[arg(long, value_name = "DIR")]
    output: PathBuf,
    /// Trust servers whose certificate chains to a CA in this PEM file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["server_cert_sha256", "insecure"])]
    ca: Option<PathBuf>,
    /// Accept exactly the server certificate with this SHA-256 fingerprint.
    #[arg(long, value_name = "HEX", conflicts_with = "insecure")]
    server_cert_sha256: Option<String>,
    /// Accept any server certificate (the handshake signature is still checked): the
    /// runner's servers use certificates no client can verify.
    #[arg(long)]
    insecure: bool,
    /// Update the 1-RTT keys early and often (every 100 packets sent; the runner's
    /// `keyupdate` case).
    #[arg(long)]
    key_update: bool,
    /// Offer only TLS_CHACHA20_POLY1305_SHA256 (the runner's `chacha20` case).
    #[arg(long)]
    chacha20: bool,
    /// Move the first path to a new local port once 64 KiB arrived, while the transfer
    /// runs: an active migration with a connection id never used before (the runner's
    /// `connectionmigration` case).
    #[arg(long)]
    migrate: bool,
    /// One path per flag: LOCAL[@IFACE][/ROLE][=REMOTE], as `braid play` takes them
    /// (more than one: multipath, RFC 10069, if the server offers it). Default: one path
    /// from any local address.
    #[arg(long = "path", value_name = "LOCAL[@IFACE][/ROLE][=REMOTE]")]
    paths: Vec<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.mode {
        Mode::Server(a) => rt.block_on(server(a)),
        Mode::Client(a) => rt.block_on(client(a)),
    }
}

/// The profile both ends use: its controller and scheduler.
fn interop_profile() -> anyhow::Result<profile::Profile> {
    profile::lookup("mptcp").context("the mptcp profile")
}

/// The transport settings: `p`'s controller and scheduler, `hq-interop`'s stream mapping.
fn interop_config(
    p: &profile::Profile,
    side: Side,
    key_update: bool,
) -> braid_transport::proto::Config {
    hq::config(&real_time(p, side, None), key_update)
}

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    if !a.root.is_dir() {
        bail!("--root {}: not a directory", a.root.display());
    }
    let identity = a.tls.identity()?;
    let retry = if a.retry { RetryPolicy::Always } else { RetryPolicy::UnderLoad };
    let config = Arc::new(interop_config(&interop_profile()?, Side::Server, false));
    let ep = driver::listen_with(a.listen, config, hq::server_crypto(&identity.crypto), retry)
        .await
        .with_context(|| format!("listening on {}", a.listen))?;
    println!("serving {} with hq-interop on {}", a.root.display(), ep.local_addr());
    tokio::select! {
        () = hq::serve(ep, a.root) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let trust = match (&a.ca, &a.server_cert_sha256, a.insecure) {
        (Some(ca), None, false) => hq::Trust::Ca(ca.clone()),
        (None, Some(pin), false) => hq::Trust::Pinned(braid_io::tls::parse_fingerprint(pin)?),
        (None, None, true) => hq::Trust::Insecure,
        _ => bail!(
            "the server is not authenticated: give --server-cert-sha256 HEX, --ca FILE or --insecure"
        ),
    };
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("--output {}", a.output.display()))?;
    let crypto = hq::client_crypto(&trust, a.chacha20)?;
    let p = interop_profile()?;
    let config = interop_config(&p, Side::Client, a.key_update);
    let (addr, names) = hq::server_of(&a.urls).await?;
    let paths = client_paths(&a.paths, addr, &p)?.into_iter().map(|n| n.spec).collect();
    let started = std::time::Instant::now();
    let conn = driver::connect(Arc::new(config), crypto, paths)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let fetch = hq::fetch(&conn, &names, &a.output);
    let fetched = if a.migrate {
        let migrate = async {
            match hq::migrate_after(&conn, hq::MIGRATE_AFTER_BYTES).await {
                Ok(local) => println!("migrated the first path to {local}"),
                Err(e) => eprintln!("warning: no migration: {e}"),
            }
            // The fetch decides when this ends.
            std::future::pending().await
        };
        tokio::select! {
            f = fetch => f,
            f = migrate => f,
        }
    } else {
        fetch.await
    };
    conn.close(0, b"").await;
    let bytes = fetched?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} files, {bytes} bytes in {secs:.3} s ({:.1} Mbit/s)",
        a.urls.len(),
        bytes as f64 * 8.0 / secs.max(1e-9) / 1e6
    );
    Ok(())
}
