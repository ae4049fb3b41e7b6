//! The client's radios and path policy: the shared sans-IO
//! [`PolicyRunner`](braid_transport::policy::PolicyRunner) (the simulator runs the same
//! one), its radios indexed by client path and fed the datagrams each path's socket
//! really sent and received.

use braid_transport::path::PathRole;
use braid_transport::policy::PolicyRunner;
use braid_transport::time::Instant;

use super::paths::ConnectOptions;

pub use braid_transport::policy::{EnergySnapshot, RadioSnapshot};

/// The policy runner of a client whose paths have `roles`, in path order, running
/// `options`' path policy.
pub(super) fn client_policy(
    roles: &[PathRole],
    options: &ConnectOptions,
    now: Instant,
) -> PolicyRunner {
    PolicyRunner::new(options.path_policy, &options.aesum, roles, now)
        .with_power(&options.power, now)
}
