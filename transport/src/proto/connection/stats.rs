//! Statistics: [`ConnectionStats`] with one [`PathStats`] per path and the input
//! [`DropCounters`], assembled by [`Connection::stats`].

use std::time::Duration;

use super::Connection;
use crate::path::{PathId, PathRole, PathStatus};

/// Datagrams dropped on input, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounters {
    /// Did not parse, or contradicted the protocol.
    pub malformed: u64,
    /// Carried another connection id.
    pub unknown_connection: u64,
    /// Came from an address that is not a validated path of this connection.
    pub unvalidated_address: u64,
    /// Arrived on a closed path more than three of its PTOs after it closed (RFC 10069's
    /// retention; until then they are taken).
    pub closed_path: u64,
    /// DATA/ABANDON frames beyond the advertised window or the bookkeeping bounds.
    pub out_of_window: u64,
    /// Packets received before.
    pub duplicate: u64,
    /// Packet numbers too far ahead of the largest received on their path.
    pub packet_number: u64,
    /// Failed packet authentication (the AEAD tag or the protected header did not
    /// verify): forged, corrupted or keyed for another connection. Never acted on.
    pub unauthenticated: u64,
    /// Arrived before this side held the keys of their level (reordered handshake packets,
    /// or 1-RTT packets before the handshake completed).
    pub no_keys: u64,
}

impl DropCounters {
    /// Datagrams this side could not even open: malformed, another connection's id,
    /// failed authentication, or no keys yet (what a stateless reset looks like).
    pub fn unusable(&self) -> u64 {
        self.malformed + self.unknown_connection + self.unauthenticated + self.no_keys
    }
}

/// Per-path statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct PathStats {
    /// The path.
    pub id: PathId,
    /// Its access network.
    pub role: PathRole,
    /// Effective status (closed if either side closed it).
    pub status: PathStatus,
    /// Marked failed after repeated RTOs.
    pub failed: bool,
    /// Datagram bytes sent.
    pub bytes_sent: u64,
    /// Datagram bytes received.
    pub bytes_received: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Packets declared lost and acknowledged afterwards (spurious losses: reordering or
    /// delay beyond the loss detector's window, or a spurious RTO).
    pub spurious_losses: u64,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Smallest RTT sample.
    pub min_rtt: Duration,
    /// The latest RTT sample.
    pub latest_rtt: Duration,
    /// Controller window.
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// One-way delay mean from receive timestamps (includes any clock offset).
    pub owd_mean: Duration,
    /// One-way delay variance, µs².
    pub owd_var_us2: f64,
    /// Message payload bytes sent (first transmissions and retransmissions).
    pub data_bytes_sent: u64,
    /// New message payload bytes received.
    pub data_bytes_received: u64,
    /// Whether the path is validated.
    pub validated: bool,
    /// Datagram bytes sent on purpose as redundancy on this path (re-injected copies and
    /// CODED packets).
    pub redundant_bytes_sent: u64,
    /// Times the path was found potentially failed (its retransmission timer fired with
    /// nothing acknowledged since).
    pub failures: u64,
    /// The datagram size the path sends (path MTU discovery's result; 0 where the
    /// transport does not say, as for the kernel's).
    pub mtu: u64,
    /// Path MTU probes acknowledged and lost.
    pub mtu_probes: (u64, u64),
}

/// Connection statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionStats {
    /// One entry per path, ordered by id (closed paths included; only the newest
    /// `3 × max_paths` closed ones are remembered).
    pub paths: Vec<PathStats>,
    /// Message payload bytes handed to the application.
    pub bytes_delivered: u64,
    /// Messages handed to the application.
    pub messages_delivered: u64,
    /// Gaps handed to the application.
    pub messages_abandoned: u64,
    /// Outgoing messages this side abandoned.
    pub messages_abandoned_sent: u64,
    /// Payload bytes sent again after a loss.
    pub retransmitted_bytes: u64,
    /// Packets declared lost, all paths.
    pub lost_packets: u64,
    /// Packets declared lost and acknowledged afterwards, all paths (closed ones included).
    pub spurious_losses: u64,
    /// The longest failover of this sender: from a failed path's last acknowledgement to
    /// the acknowledgement, on another path, of the first data sent after the failure was
    /// detected. `None` when no path failed while data was flowing.
    pub failover_time: Option<Duration>,
    /// Input drops.
    pub dropped: DropCounters,
    /// Bytes this side sent more than once on purpose: CODED frames of the streaming code
    /// and DATA payload copied by re-injection.
    pub redundant_bytes: u64,
    /// Re-injection's counters (all zero when it is off).
    pub reinject: super::ReinjectStats,
    /// The streaming code's counters (`None` when it is off).
    pub fec: Option<super::FecStats>,
    /// Joining paths retired because they were not validated in time.
    pub paths_expired: u64,
    /// Peer address changes (NAT rebinding, migration) validated and taken, and those whose
    /// validation failed (the path went back to the address it had).
    pub migrations: u64,
    /// See [`ConnectionStats::migrations`].
    pub migrations_failed: u64,
    /// 1-RTT key updates so far (both directions move together).
    pub key_updates: u64,
    /// RATE_FEEDBACK reports whose receive rate claimed more than this side sent, cut down
    /// to what it sent (`rate_feedback`).
    pub rate_feedback_capped: u64,
    /// Active migrations of this side ([`super::Connection::migrate`], a client's).
    pub migrated: u64,
    /// PATH_NEW_CONNECTION_ID frames from the peer ignored: no room left for its ids
    /// ([`crate::proto::MAX_CIDS`]), a path id closed here, or an id repeated with other
    /// values; and retirements of ids already dropped.
    pub cids_refused: u64,
    /// RETIRE_CONNECTION_ID frames sent (first transmissions): ids of the peer's retired
    /// after a migration or a Retire Prior To.
    pub cids_retired: u64,
    /// Estimated in-order delay of the messages read here, µs: from each message's first
    /// arrival less half its path's minimum RTT to its read (`connection/arrival.rs`); an
    /// even subsample of at most 8192 once more were read.
    pub in_order_delay_us: Vec<u64>,
    /// Messages whose arrival was not timed (too many unread at once).
    pub untimed_messages: u64,
    /// The application's read rate as this side measures it, bits/s: what it read over
    /// the last second, the time it waited with nothing to read left out
    /// ([`Connection::reader_starved`]).
    pub read_rate_bps: f64,
}

impl Connection {
    /// Statistics.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            paths: self
                .paths
                .values()
                .map(|p| PathStats {
                    id: p.id,
                    role: p.role,
                    status: p.status(),
                    failed: p.failed,
                    bytes_sent: p.counters.bytes_sent(),
                    bytes_received: p.counters.bytes_received(),
                    packets_sent: p.counters.packets_sent(),
                    packets_lost: p.counters.packets_lost(),
                    spurious_losses: p.loss.spurious_losses(),
                    srtt: p.rtt.smoothed(),
                    min_rtt: p.rtt.min(),
                    latest_rtt: p.rtt.latest(),
                    cwnd: self.controller.window(p.id),
                    in_flight: p.loss.in_flight(),
                    owd_mean: p.owd.mean(),
                    owd_var_us2: p.owd.var_us2(),
                    data_bytes_sent: p.counters.data_bytes_sent(),
                    data_bytes_received: p.counters.data_bytes_received(),
                    validated: p.validated,
                    failures: p.failures,
                    redundant_bytes_sent: p.counters.redundant_bytes_sent(),
                    mtu: p.mtud.current() as u64,
                    mtu_probes: (p.mtud.probes_acked, p.mtud.probes_lost),
                })
                .collect(),
            bytes_delivered: self.stats_delivered_bytes,
            messages_delivered: self.stats_delivered_messages,
            messages_abandoned: self.stats_gaps,
            messages_abandoned_sent: self.send.abandoned_count(),
            retransmitted_bytes: self.stats_retransmitted,
            lost_packets: self.stats_lost,
            spurious_losses: self.stats_spurious,
            failover_time: self.failover_max,
            dropped: self.dropped,
            redundant_bytes: self.fec_stats().map_or(0, |f| f.coded_bytes) + self.qoe.stats.bytes,
            reinject: self.qoe.stats,
            fec: self.fec_stats(),
            paths_expired: self.unvalidated_expired,
            migrations: self.migrations.0,
            migrations_failed: self.migrations.1,
            key_updates: self.tls.key_updates(),
            rate_feedback_capped: self.rate_feedback_capped,
            migrated: self.migrated,
            cids_refused: self.cids.refused,
            cids_retired: self.cids.retired_sent,
            in_order_delay_us: self.arrivals.samples_us().to_vec(),
            untimed_messages: self.arrivals.untimed,
            read_rate_bps: self.read_meter.rate_bps(),
        }
    }
}
