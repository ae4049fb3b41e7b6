//! `braid proxy --listen ADDR --upstream ADDR [--upstream-profile P] [--downstream-profile Q]`:
//! the proxy paper's scenario B. Each client connection accepted on `--listen` (with the
//! downstream profile) gets its own connection to the server at `--upstream` (with the
//! upstream profile); messages are relayed both ways, in order, each re-sent with the
//! delivery rule of the profile of the connection it leaves on. So the TCP-friendly rate
//! control runs only over the shared upstream part, and the proxy buffers what the client's
//! side cannot take yet (its receive window and the downstream connection's flow control
//! bound that buffer).
//!
//! Gaps (messages the upstream sender abandoned) are not forwarded: the downstream
//! connection numbers only what it carries.

use std::net::SocketAddr;

use anyhow::Context as _;

use crate::choice::TransportSpec;

/// Arguments of `braid proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to accept client connections on.
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The server the proxy connects to for each client.
    #[arg(long, value_name = "ADDR")]
    pub upstream: SocketAddr,
    /// Transport profile toward the server (the shared, TCP-friendly part), `PROFILE` or
    /// `PROFILE+CC`.
    #[arg(long, value_name = "P", default_value = "tfrc")]
    pub upstream_profile: TransportSpec,
    /// Transport profile toward the client, `PROFILE` or `PROFILE+CC`.
    #[arg(long, value_name = "Q", default_value = "tcp")]
    pub downstream_profile: TransportSpec,
    /// The proxy's own identity toward its clients.
    #[command(flatten)]
    pub tls: crate::cmd::tls::ServerTls,
    /// How the proxy authenticates the upstream server.
    #[command(flatten)]
    pub upstream_tls: crate::cmd::tls::ClientTls,
}

/// Runs the proxy until interrupted.
pub fn run(args: Args) -> anyhow::Result<()> {
    let up = args.upstream_profile.braid_profile(None, "the proxy")?;
    let down = args.downstream_profile.braid_profile(None, "the proxy")?;
    let trust = args.upstream_tls.crypto()?;
    let identity = args.tls.identity()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(crate::session::proxy::run(
        args.listen,
        args.upstream,
        up,
        down,
        (identity.crypto, trust),
    ))
}
