//! Reproduction (being written).

use std::path::Path;

/// Runs the reproduction with `seeds` seeds; writes repro.json into `out` when given.
pub fn run(_seeds: u32, _out: Option<&Path>) -> anyhow::Result<()> {
    anyhow::bail!("this reproduction is not available in this build")
}
