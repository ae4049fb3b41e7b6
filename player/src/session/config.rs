//! The connection configuration of every real-time front end (serve, play, perf, proxy,
//! demo, compare): [`Profile::connection_config`] on the real clock.

use std::sync::Arc;

use braid_transport::profile::{Clock, ConfigParams, Profile, Side};
use braid_transport::proto::Config;

/// `profile`'s configuration for `side` in real time, with the receive buffer (and so the
/// flow-control window) `recv_buffer_bytes` (`None`: the transport's default).
pub fn real_time(profile: &Profile, side: Side, recv_buffer_bytes: Option<u64>) -> Arc<Config> {
    let mut params = ConfigParams::new(side, Clock::Real);
    params.recv_buffer_bytes = recv_buffer_bytes;
    Arc::new(profile.connection_config(params))
}

#[cfg(test)]
mod tests {
    use braid_transport::profile::{self, REAL_TIME_KEEP_ALIVE};
    use braid_transport::sim::main_flow_config;

    use super::*;

    /// What the simulator and the real-time front ends run is the same configuration for
    /// every registered profile and both ends; the one documented difference of the clock
    /// is the real-time client's keep-alive.
    #[test]
    fn simulated_and_real_time_configurations_are_equal_for_every_profile() {
        let recv = Some(300_000);
        let all = profile::all();
        assert!(all.len() >= 17, "registry shrank: {}", all.len());
        for p in &all {
            for side in [Side::Client, Side::Server] {
                // The real-time server keeps the default receive buffer, as the
                // simulator's server does (its client gets the player's buffer).
                let rt_recv = if side == Side::Client { recv } else { None };
                let sim = main_flow_config(p, side, recv);
                let mut real = (*real_time(p, side, rt_recv)).clone();
                let expect_keep_alive = (side == Side::Client).then_some(REAL_TIME_KEEP_ALIVE);
                assert_eq!(real.keep_alive, expect_keep_alive, "{} {side:?}", p.name);
                assert_eq!(sim.keep_alive, None, "{} {side:?}", p.name);
                real.keep_alive = None;
                assert_eq!(
                    format!("{sim:?}"),
                    format!("{real:?}"),
                    "{} {side:?}: simulator and real time differ",
                    p.name
                );
            }
        }
    }
}
