//! Flow control and the application read rate. The send credit is the peer's MAX_DATA
//! minus what is queued or unacknowledged; this side advertises `read offset + receive
//! buffer` with MAX_DATA whenever reading freed enough space. The read-rate meter measures
//! what [`Connection::read_message`] returns; while the application reads, READ_RATE
//! reports it every [`super::Config::read_rate_interval`], and the peer's report goes to
//! the controller and the scheduler.

use super::Connection;
use super::packetize::Builder;
use crate::proto::frame::Frame;
use crate::time::Instant;

impl Connection {
    /// Bytes the application may queue right now: the peer's receive window minus what is
    /// queued or unacknowledged.
    pub fn send_capacity(&self) -> u64 {
        if self.is_closed() { 0 } else { self.send.capacity() }
    }

    /// The application read rate measured on this side, bits/s: message bytes returned by
    /// [`Connection::read_message`] during the last second (see [`crate::proto::rate`]), as
    /// of the last `read_message` or `handle_timeout`.
    pub fn read_rate_bps(&self) -> f64 {
        self.read_meter.rate_bps()
    }

    /// The read rate the peer last reported with READ_RATE, bits/s.
    pub fn peer_read_rate_bps(&self) -> Option<f64> {
        self.peer_read_rate
    }

    /// Bytes of message data queued on the send side and not yet released: waiting to be
    /// sent, in flight, or awaiting a retransmission (everything below is acknowledged or
    /// abandoned).
    pub fn send_buffered(&self) -> u64 {
        self.send.buffered()
    }

    /// Bytes buffered in the receive stream (received, not yet read).
    pub fn recv_buffered(&self) -> u64 {
        self.recv.buffered()
    }

    /// Queues a MAX_DATA if the receive window grew enough to be worth advertising.
    pub(super) fn check_window_update(&mut self) {
        if self.recv.window_update().is_some() {
            self.max_data_pending = true;
        }
    }

    /// The application read `bytes` of message data: the meter records them and, if none
    /// is scheduled, the next READ_RATE report is.
    pub(super) fn on_read(&mut self, bytes: u64) {
        self.read_meter.record(self.now, bytes);
        if self.next_read_rate_report.is_none() && !self.is_closed() {
            self.next_read_rate_report = Some(self.now + self.config.read_rate_interval);
        }
    }

    /// A MAX_DATA frame arrived: the peer's new limit.
    pub(super) fn on_max_data(&mut self, max: u64) {
        self.send.set_max_data(max);
    }

    /// A READ_RATE frame arrived.
    pub(super) fn on_read_rate(&mut self, now: Instant, bps: u64) {
        let bps = bps as f64;
        self.peer_read_rate = Some(bps);
        // Rate control (MARC) and path scheduling (eMTCP offload) steer on it.
        self.controller.on_read_rate(now, bps);
        self.scheduler.on_peer_read_rate(now, bps);
    }

    /// The READ_RATE report timer: a report is due; the next one is scheduled while the
    /// meter still sees reads.
    pub(super) fn on_read_rate_timer(&mut self, now: Instant) {
        if self.next_read_rate_report.is_some_and(|t| t <= now) {
            self.read_rate_pending = true;
            self.next_read_rate_report = if self.read_meter.active() {
                Some(now + self.config.read_rate_interval)
            } else {
                None
            };
        }
    }

    /// Adds the pending MAX_DATA (the larger of the advertised and the current limit).
    pub(super) fn add_max_data(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.max_data_pending {
            let f = Frame::MaxData { max: self.recv.advertised().max(self.recv.max_data()) };
            if b.push(buf, &f) {
                self.max_data_pending = false;
                b.frames.max_data = true;
            }
        }
    }

    /// Adds the pending READ_RATE report.
    pub(super) fn add_read_rate(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.read_rate_pending {
            let f = Frame::ReadRate { bps: self.read_meter.rate_bps().max(0.0) as u64 };
            if b.push(buf, &f) {
                self.read_rate_pending = false;
                b.frames.read_rate = true;
            }
        }
    }
}
