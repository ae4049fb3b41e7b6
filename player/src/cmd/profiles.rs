//! `braid profiles [--json]`: the transports a run can name, with their parts.

use anyhow::Context as _;

/// Arguments of `braid profiles`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON array instead of the table: name, stack, controller, scheduler,
    /// path_policy, paths, runs_on, description per entry.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.json {
        let text = serde_json::to_string_pretty(&crate::choice::registry())
            .context("serialising the registry")?;
        println!("{text}");
    } else {
        print!("{}", crate::choice::registry_table());
    }
    Ok(())
}
