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
    /// Independent simulated runs in parallel, N at a time (default: the number of cores);
    /// the output is the same for any N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Protect simulated packets with the real AEAD (AES-128-GCM) instead of the null
    /// cipher (same sizes and results, no cipher work).
    #[arg(long)]
    protect: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    let out = args.out.as_deref();
    let jobs = crate::session::parallel::Batch {
        jobs: crate::session::parallel::jobs(args.jobs)?,
        protect: args.protect,
    };
    match args.name {
        Name::MptcpQe => crate::repro::mptcp_qe::run(args.seeds, out, jobs),
        Name::Proxy => crate::repro::proxy::run(args.seeds, out, jobs),
        Name::Marc => crate::repro::marc::run(args.seeds, out, jobs),
        Name::Sedpf => crate::repro::sedpf::run(args.seeds, out, jobs),
    }
}
