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
