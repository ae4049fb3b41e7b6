//! `braid repro NAME [--seeds N] [--out DIR] [--duration S] [--part P …]`.

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
    /// Shorten every simulated run to S seconds (`mptcp-qe`, `marc`, `sedpf`): a quick
    /// check of the table, not the papers' figures, which need the full runs.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Independent simulated runs in parallel, N at a time (default: the number of cores);
    /// the output is the same for any N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Run only this part (`sedpf`: a, b or c; repeatable); default: every part.
    #[arg(long, value_name = "P")]
    part: Vec<String>,
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
    let batch = crate::session::parallel::Batch {
        jobs: crate::session::parallel::jobs(args.jobs)?,
        protect: args.protect,
    };
    let duration = match args.duration {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(s) => anyhow::bail!("--duration {s}: must be a number of seconds in (0, 86400]"),
    };
    if !args.part.is_empty() && !matches!(args.name, Name::Sedpf) {
        anyhow::bail!("--part applies to sedpf only (its parts a, b and c)");
    }
    match (args.name, duration) {
        (Name::MptcpQe, d) => crate::repro::mptcp_qe::run(args.seeds, out, d, batch),
        (Name::Marc, d) => crate::repro::marc::run(args.seeds, out, d, batch),
        (Name::Proxy, Some(_)) => anyhow::bail!(
            "--duration applies to mptcp-qe, marc and sedpf only (the proxy schedules need the whole clip delivered)"
        ),
        (Name::Proxy, None) => crate::repro::proxy::run(args.seeds, out, batch),
        (Name::Sedpf, d) => {
            let mut plan = crate::repro::sedpf::Plan::default();
            if !args.part.is_empty() {
                plan.parts = args.part.clone();
            }
            if let Some(d) = d {
                plan.duration_s = d.as_secs_f64();
            }
            crate::repro::sedpf::run(args.seeds, out, &plan, batch)
        }
    }
}
