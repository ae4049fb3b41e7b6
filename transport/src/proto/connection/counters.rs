//! A path's counters (what it sent, received and lost), owned by the path and reported by
//! [`super::Connection::stats`].

/// A path's counters: what it sent, received and lost. They only grow, through these
/// methods; `PathStats` reports them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PathCounters {
    bytes_sent: u64,
    bytes_received: u64,
    packets_sent: u64,
    packets_lost: u64,
    data_bytes_sent: u64,
    data_bytes_received: u64,
    redundant_bytes_sent: u64,
}

impl PathCounters {
    /// A datagram of `bytes` went out on the path, carrying `data_bytes` of stream data.
    pub(super) fn on_sent(&mut self, bytes: u64, data_bytes: u64) {
        self.bytes_sent += bytes;
        self.packets_sent += 1;
        self.data_bytes_sent += data_bytes;
    }

    /// A datagram of `bytes` arrived on the path.
    pub(super) fn on_received(&mut self, bytes: u64) {
        self.bytes_received += bytes;
    }

    /// `bytes` of new stream data arrived on the path.
    pub(super) fn on_data_received(&mut self, bytes: u64) {
        self.data_bytes_received += bytes;
    }

    /// `packets` sent on the path were declared lost.
    pub(super) fn on_lost(&mut self, packets: u64) {
        self.packets_lost += packets;
    }

    /// `bytes` of datagrams went out on purpose as redundancy.
    pub(super) fn on_redundant_sent(&mut self, bytes: u64) {
        self.redundant_bytes_sent += bytes;
    }

    /// Packets sent.
    pub(super) fn packets_sent(&self) -> u64 {
        self.packets_sent
    }

    /// Packets declared lost.
    pub(super) fn packets_lost(&self) -> u64 {
        self.packets_lost
    }

    /// Stream data bytes sent.
    pub(super) fn data_bytes_sent(&self) -> u64 {
        self.data_bytes_sent
    }
    /// Datagram bytes sent.
    pub(super) fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    /// Datagram bytes received.
    pub(super) fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// New stream data bytes received.
    pub(super) fn data_bytes_received(&self) -> u64 {
        self.data_bytes_received
    }

    /// Datagram bytes sent as redundancy.
    pub(super) fn redundant_bytes_sent(&self) -> u64 {
        self.redundant_bytes_sent
    }
}
