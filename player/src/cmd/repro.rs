//! `braid repro NAME [--seeds N] [--out DIR]`.

use std::path::PathBuf;

/// Which published result.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Name {
    /// Energy-aware multipath (MPTCP-QE paper).
    #[value(name = "mptcp-qe")]
    MptcpQe,
    /// TCP-friendly streaming with a proxy (proxy paper).
    Proxy,
    /// Media-aware rate control (MARC slides).
    Marc,
    /// Low-delay multipath scheduling (S-EDPF paper).
    Sedpf,
}

/// Arguments of `braid repro`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The result to reproduce.
    name: Name,
    /// Runs per configuration (seeds seed … seed+N−1).
    #[arg(long, default_value_t = 3)]
    seeds: u32,
    /// Write repro.json (and the runs' reports) here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    let out = args.out.as_deref();
    match args.name {
        Name::MptcpQe => crate::repro::mptcp_qe::run(args.seeds, out),
        Name::Proxy => crate::repro::proxy::run(args.seeds, out),
        Name::Marc => crate::repro::marc::run(args.seeds, out),
        Name::Sedpf => crate::repro::sedpf::run(args.seeds, out),
    }
}
