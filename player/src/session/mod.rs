//! The player's sessions: media over the transport, in the simulator or in real time.

use braid_transport::profile::Profile;
use braid_transport::scenario::Scenario;
use braid_transport::sim::{self, RunOptions, SimResult};

/// Runs a scenario in the simulator with the workload it asks for.
pub fn simulate(scenario: &Scenario, profile: &Profile, opts: &RunOptions) -> anyhow::Result<SimResult> {
    Ok(sim::run_detailed(scenario, profile, opts)?)
}
