//! weSACK's ACK path (MPTCP-QE paper, eq. 10; ALGORITHMS.md §4 \[approx\]): every ACK goes
//! on the path whose radio costs the least extra energy to wake and use — in practice
//! WiFi (short promotion and tail), the cellular radio only when WiFi cannot carry it.
//!
//! The policy sees only the connection's path snapshots, not the radios, so it ranks by
//! radio kind ([`role_cost`]): with the Huang et al. parameters (ALGORITHMS.md §5) a WiFi
//! wake-up (promotion + tail ≈ 0.04 J) costs two orders of magnitude less than an LTE one
//! (promotion + DRX tail ≈ 12.6 J), so the order does not depend on which radio happens
//! to be awake, except when WiFi is unusable.

use crate::path::{PathId, role_cost};
use crate::proto::AckPathPolicy;
use crate::sched::PathView;

/// ACKs on the cheapest usable radio (ties: lower smoothed RTT, then lower id); `None`
/// when no path is usable (the ACK waits).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheapestRadioAcks;

impl AckPathPolicy for CheapestRadioAcks {
    fn ack_path(&self, _received_on: PathId, paths: &[PathView]) -> Option<PathId> {
        paths
            .iter()
            .filter(|p| p.usable)
            .min_by_key(|p| (role_cost(p.role), p.srtt, p.id))
            .map(|p| p.id)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::path::{PathRole, PathStatus};

    fn view(id: u32, role: PathRole, srtt_ms: u64, usable: bool) -> PathView {
        PathView {
            id: PathId(id),
            role,
            status: PathStatus::Active,
            usable,
            srtt: Duration::from_millis(srtt_ms),
            rttvar: Duration::ZERO,
            cwnd: 12_000,
            in_flight: 0,
            pacing_rate: None,
            next_send_time: None,
            owd: None,
            owd_var_us2: 0.0,
        }
    }

    #[test]
    fn acks_for_lte_data_go_on_wifi_even_when_lte_is_faster() {
        let paths = [view(0, PathRole::Lte, 20, true), view(1, PathRole::Wifi, 80, true)];
        assert_eq!(CheapestRadioAcks.ack_path(PathId(0), &paths), Some(PathId(1)));
        assert_eq!(CheapestRadioAcks.ack_path(PathId(1), &paths), Some(PathId(1)));
    }

    #[test]
    fn acks_move_to_lte_only_when_wifi_is_unusable() {
        let paths = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, true)];
        assert_eq!(CheapestRadioAcks.ack_path(PathId(0), &paths), Some(PathId(1)));
        let none = [view(0, PathRole::Wifi, 20, false)];
        assert_eq!(CheapestRadioAcks.ack_path(PathId(0), &none), None);
    }
}
