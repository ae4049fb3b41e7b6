//! `braid perf`: iperf3-like throughput runs over the built-in transport (being written).

/// Arguments of `braid perf`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("braid perf is not available in this build")
}
