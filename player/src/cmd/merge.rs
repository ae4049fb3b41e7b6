//! `braid merge DIR… --out DIR`: combines the outputs of `braid compare --shard K/N`
//! into exactly what the unsharded comparison writes ([`crate::session::sweep`]).

use std::path::PathBuf;

use anyhow::Context as _;

use crate::session::compare::{self, table};
use crate::session::sweep;

/// Arguments of `braid merge`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The `--out` directories of the shards (each holds a `shard.json`), in any order.
    #[arg(required = true, value_name = "DIR")]
    shards: Vec<PathBuf>,
    /// Where to write the merged comparison: compare.json, scatter.png and every run's CSV
    /// and PNG, as the unsharded `braid compare --out` writes them.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let c = sweep::merge(&args.shards)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    sweep::copy_run_files(&args.shards, &args.out)?;
    print!("{}", table(&c));
    compare::write_outputs(&args.out, &c)
}
